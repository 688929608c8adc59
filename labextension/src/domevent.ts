/**
 * DOM channel: the widget dispatches INSERT_EVENT (bubbling) from its node while the user's click
 * on its Insert button is being dispatched; the listener on the notebook panel inserts below the
 * cell whose output holds the widget and marks the event handled, synchronously, so the widget
 * knows an extension answered. No kernel round trip: works while a cell is running.
 *
 * Any script in the page can dispatch a CustomEvent (never `isTrusted`), so the event alone
 * proves nothing. It is answered only when its `detail.trigger` is a real, browser-made
 * (`isTrusted`) click that is being dispatched right now, on the Insert button inside the very
 * widget node that dispatched the event, that widget sits in a cell's output, that cell's id is
 * the request's `cell_id` (the kernel's id of the cell that ran it), and the request is within
 * the schema (no unknown fields, bounded source). One click answers one event.
 */

import { insertBelowWidget, INotebookAdapter } from './insert';
import {
  EVENT_ONLY_FIELDS,
  IInsertCellReply,
  isRecord,
  parseInsertCellRequest,
  requestIdOf
} from './records';

/** The part of a DOM CustomEvent the handler uses. */
export interface IInsertEvent {
  readonly detail: unknown;
  /** The node the widget dispatched the event from (its root element). */
  readonly target: unknown;
  preventDefault(): void;
  stopPropagation(): void;
}

/** What the browser says about the click that triggered a request. */
export interface IClickFacts {
  /** Made by the browser for a user action, not by a script. */
  isTrusted: boolean;
  type: string;
  /** Still being dispatched (a finished event has eventPhase NONE). */
  dispatching: boolean;
  /** The node clicked. */
  target: unknown;
}

/** Reads an event's facts; null when `value` is not a real Event (only looks like one). */
export type ClickReader = (value: unknown) => IClickFacts | null;

type Getter = (this: unknown) => unknown;

function nativeGetter(name: 'isTrusted' | 'type' | 'eventPhase' | 'target'): Getter | undefined {
  if (typeof Event === 'undefined') {
    return undefined;
  }
  // isTrusted is an own (unforgeable) property of each event in browsers, on the prototype in
  // Node. Taken once, when this module loads, before any notebook output can patch Event.
  const probe = new Event('gpu-notebook-probe');
  const descriptor =
    Object.getOwnPropertyDescriptor(probe, name) ??
    Object.getOwnPropertyDescriptor(Event.prototype, name);
  return descriptor?.get as Getter | undefined;
}

const GETTERS = {
  isTrusted: nativeGetter('isTrusted'),
  type: nativeGetter('type'),
  eventPhase: nativeGetter('eventPhase'),
  target: nativeGetter('target')
};

/**
 * The facts of a real Event, read through the native getters: a plain object or a subclass
 * instance that defines its own `isTrusted: true` makes them throw (brand check), so it is null.
 */
export const readClick: ClickReader = value => {
  const { isTrusted, type, eventPhase, target } = GETTERS;
  if (
    !isTrusted ||
    !type ||
    !eventPhase ||
    !target ||
    typeof value !== 'object' ||
    value === null
  ) {
    return null;
  }
  try {
    return {
      isTrusted: isTrusted.call(value) === true,
      type: String(type.call(value)),
      dispatching: eventPhase.call(value) !== 0,
      target: target.call(value)
    };
  } catch {
    return null;
  }
};

// The clicks already answered: a script that catches the user's click cannot reuse it.
const answeredClicks = new WeakSet<object>();

function isDetail(value: unknown): value is Record<string, unknown> {
  return isRecord(value) && 'handled' in value && 'reply' in value;
}

/** The reply for one event detail (never throws). */
function replyFor(
  detail: Record<string, unknown>,
  widgetNode: unknown,
  notebook: INotebookAdapter,
  read: ClickReader
): IInsertCellReply {
  const request_id = requestIdOf(detail);
  const refuse = (why: string): IInsertCellReply => ({
    request_id,
    status: 'error',
    message: `nothing inserted: ${why}`
  });
  const trigger = detail.trigger;
  const click = read(trigger);
  if (
    click === null ||
    !click.isTrusted ||
    click.type !== 'click' ||
    !click.dispatching ||
    !notebook.isInsertButtonIn(click.target, widgetNode)
  ) {
    return refuse("the request does not come from a click on the widget's Insert button");
  }
  if (answeredClicks.has(trigger as object)) {
    return refuse('this click was answered already');
  }
  answeredClicks.add(trigger as object);
  const request: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(detail)) {
    if (!(EVENT_ONLY_FIELDS as ReadonlyArray<string>).includes(key)) {
      request[key] = value;
    }
  }
  try {
    return insertBelowWidget(notebook, parseInsertCellRequest(request), widgetNode);
  } catch (error) {
    return refuse(`malformed request: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * Answer one event: fill `detail.handled` / `detail.reply`, preventDefault, stop propagation.
 *
 * @param read how to read the triggering click (tests pass a fake; the default reads a real Event)
 * @returns false (and leaves the event alone) when its detail is not ours or already answered.
 */
export function answerInsertEvent(
  event: IInsertEvent,
  notebook: INotebookAdapter,
  read: ClickReader = readClick
): boolean {
  const detail = event.detail;
  if (!isDetail(detail) || detail.handled !== false) {
    return false;
  }
  detail.reply = replyFor(detail, event.target, notebook, read);
  detail.handled = true;
  event.preventDefault();
  event.stopPropagation();
  return true;
}
