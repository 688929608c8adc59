/**
 * DOM channel: the widget dispatches INSERT_EVENT (bubbling) from its node; the listener on the
 * notebook panel inserts below the enclosing cell and marks the event handled, synchronously, so
 * the widget knows an extension answered. No kernel round trip: works while a cell is running.
 */

import { insertBelow, INotebookAdapter } from './insert';
import { IInsertCellEventDetail, parseInsertCellRequest, requestIdOf } from './records';

/** The part of a DOM CustomEvent the handler uses. */
export interface IInsertEvent {
  readonly detail: unknown;
  readonly target: unknown;
  preventDefault(): void;
  stopPropagation(): void;
}

function isDetail(value: unknown): value is IInsertCellEventDetail {
  return typeof value === 'object' && value !== null && 'handled' in value && 'reply' in value;
}

/**
 * Answer one event: fill `detail.handled` / `detail.reply`, preventDefault, stop propagation.
 *
 * @returns false (and leaves the event alone) when its detail is not ours or already answered.
 */
export function answerInsertEvent(event: IInsertEvent, notebook: INotebookAdapter): boolean {
  const detail = event.detail;
  if (!isDetail(detail) || detail.handled) {
    return false;
  }
  try {
    const { request_id, cell_id, source, title } = detail;
    const request = parseInsertCellRequest({ request_id, cell_id, source, title });
    detail.reply = insertBelow(notebook, request, event.target);
  } catch (error) {
    detail.reply = {
      request_id: requestIdOf(detail),
      status: 'error',
      message: `malformed request: ${error instanceof Error ? error.message : String(error)}`
    };
  }
  detail.handled = true;
  event.preventDefault();
  event.stopPropagation();
  return true;
}
