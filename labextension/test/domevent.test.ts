import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { answerInsertEvent, ClickReader, IClickFacts, readClick } from '../src/domevent';
import { IInsertCellEventDetail, IInsertCellRequest, INSERT_EVENT } from '../src/records';
import { fakeWidget, FakeNotebook, IFakeWidget } from './fakes';

const REQUEST: IInsertCellRequest = {
  request_id: 'd1',
  cell_id: 'widget',
  source: '# gpucheck fix: workers\nx = 1\n',
  title: 'workers'
};

/** A click as the browser reports it: trusted and being dispatched unless said otherwise. */
function click(target: unknown, overrides: Partial<IClickFacts> = {}): IClickFacts {
  return { isTrusted: true, type: 'click', dispatching: true, target, ...overrides };
}

/** Reads the fake clicks above as facts, like readClick reads a real Event. */
const readFake: ClickReader = value =>
  typeof value === 'object' && value !== null && 'dispatching' in value
    ? (value as IClickFacts)
    : null;

function fakeEvent(detail: unknown, target: unknown) {
  return {
    detail,
    target,
    prevented: false,
    stopped: false,
    preventDefault() {
      this.prevented = true;
    },
    stopPropagation() {
      this.stopped = true;
    }
  };
}

/** The event a click on `widget`'s Insert button makes the widget dispatch. */
function clickEvent(
  widget: IFakeWidget,
  request: object = REQUEST,
  trigger: unknown = click(widget.button)
) {
  const detail = { ...request, handled: false, reply: null, trigger };
  return { detail: detail as IInsertCellEventDetail, event: fakeEvent(detail, widget.root) };
}

describe('answerInsertEvent', () => {
  it('inserts below the cell whose output holds the widget and marks the event handled', () => {
    const nb = new FakeNotebook(['above', 'widget', 'below']);
    const { detail, event } = clickEvent(nb.showWidget('widget'));
    assert.equal(answerInsertEvent(event, nb, readFake), true);
    assert.deepEqual(nb.ids(), ['above', 'widget', 'new-0', 'below']);
    assert.equal(detail.handled, true);
    assert.equal(detail.reply?.status, 'inserted');
    assert.equal(detail.reply?.request_id, 'd1');
    assert.equal(event.prevented, true);
    assert.equal(event.stopped, true);
  });

  it('answers a second click with the same request id as duplicate', () => {
    const nb = new FakeNotebook(['widget']);
    const widget = nb.showWidget('widget');
    answerInsertEvent(clickEvent(widget).event, nb, readFake);
    const { detail, event } = clickEvent(widget);
    answerInsertEvent(event, nb, readFake);
    assert.equal(detail.reply?.status, 'duplicate');
    assert.equal(nb.inserts, 1);
  });

  it('leaves foreign or already answered events alone', () => {
    const nb = new FakeNotebook(['widget']);
    const widget = nb.showWidget('widget');
    const foreign = fakeEvent({ something: 'else' }, widget.root);
    assert.equal(answerInsertEvent(foreign, nb, readFake), false);
    assert.equal(foreign.prevented, false);
    const answered = clickEvent(widget);
    answered.detail.handled = true;
    assert.equal(answerInsertEvent(answered.event, nb, readFake), false);
    assert.equal(nb.inserts, 0);
  });

  /** Answer `event` and check it was refused with a message matching `why`. */
  function assertRefused(
    nb: FakeNotebook,
    made: ReturnType<typeof clickEvent>,
    why: RegExp,
    read: ClickReader = readFake
  ): void {
    assert.equal(answerInsertEvent(made.event, nb, read), true);
    assert.equal(made.detail.handled, true, 'a refusal is an answer: the widget shows it');
    assert.equal(made.detail.reply?.status, 'error');
    assert.match(made.detail.reply?.message ?? '', why);
    assert.equal(nb.inserts, 0);
  }

  it('refuses a request no trusted click caused (a page script dispatched it)', () => {
    const nb = new FakeNotebook(['widget']);
    const widget = nb.showWidget('widget');
    const notAClick = /does not come from a click on the widget's Insert button/;
    assertRefused(nb, clickEvent(widget, REQUEST, null), notAClick);
    assertRefused(
      nb,
      clickEvent(widget, REQUEST, click(widget.button, { isTrusted: false })),
      notAClick
    );
    assertRefused(
      nb,
      clickEvent(widget, REQUEST, click(widget.button, { type: 'keydown' })),
      notAClick
    );
    // A real click kept from earlier and replayed after its dispatch ended.
    assertRefused(
      nb,
      clickEvent(widget, REQUEST, click(widget.button, { dispatching: false })),
      notAClick
    );
  });

  it("refuses a trusted click on anything but this widget's Insert button", () => {
    const nb = new FakeNotebook(['widget', 'other']);
    const widget = nb.showWidget('widget');
    const elsewhere = nb.showWidget('other');
    const notAClick = /does not come from a click on the widget's Insert button/;
    assertRefused(nb, clickEvent(widget, REQUEST, click(widget.root)), notAClick);
    assertRefused(nb, clickEvent(widget, REQUEST, click(elsewhere.button)), notAClick);
  });

  it('answers one click once: a script that catches the click cannot send a second request', () => {
    const nb = new FakeNotebook(['widget']);
    const widget = nb.showWidget('widget');
    const trigger = click(widget.button);
    answerInsertEvent(clickEvent(widget, REQUEST, trigger).event, nb, readFake);
    const again = clickEvent(
      widget,
      { ...REQUEST, request_id: 'd2', source: 'import evil\n' },
      trigger
    );
    answerInsertEvent(again.event, nb, readFake);
    assert.equal(again.detail.reply?.status, 'error');
    assert.match(again.detail.reply?.message ?? '', /answered already/);
    assert.equal(nb.inserts, 1);
  });

  it('inserts only below the cell the widget was made in', () => {
    const nb = new FakeNotebook(['made-here', 'shown-again']);
    // The same widget displayed again in a later cell: its request names the first cell.
    const again = nb.showWidget('shown-again');
    assertRefused(
      nb,
      clickEvent(again, { ...REQUEST, cell_id: 'made-here' }),
      /made in cell made-here, not in cell shown-again/
    );
    assertRefused(nb, clickEvent(again, { ...REQUEST, cell_id: null }), /does not know the cell/);
  });

  it('refuses a widget outside every cell output (in an editor, a dialog, another panel)', () => {
    const nb = new FakeNotebook(['widget']);
    assertRefused(nb, clickEvent(fakeWidget()), /not in a cell's output/);
  });

  it('refuses unknown fields, a bad cell id and an oversized source, as the schema says', () => {
    const nb = new FakeNotebook(['widget']);
    const widget = nb.showWidget('widget');
    assertRefused(nb, clickEvent(widget, { ...REQUEST, extra: 1 }), /unknown fields \[extra\]/);
    assertRefused(nb, clickEvent(widget, { ...REQUEST, title: 7 }), /title: expected a string/);
    assertRefused(nb, clickEvent(widget, { ...REQUEST, cell_id: '../x' }), /cell_id/);
    const huge = 'x'.repeat(500_001);
    assertRefused(
      nb,
      clickEvent(widget, { ...REQUEST, source: huge }),
      /source: expected at most 500000/
    );
  });
});

describe('readClick', () => {
  it('reads a real event through the native getters', () => {
    const facts = readClick(new Event('click'));
    assert.deepEqual(facts, { isTrusted: false, type: 'click', dispatching: false, target: null });
  });

  it('sees through objects and events that only claim to be trusted', () => {
    const plain = { isTrusted: true, type: 'click', eventPhase: 2, target: {} };
    assert.equal(readClick(plain), null);
    const forged = new Event('click');
    Object.defineProperty(forged, 'isTrusted', { value: true });
    assert.equal(readClick(forged)?.isTrusted, false);
    assert.equal(readClick(null), null);
  });

  it('makes answerInsertEvent refuse a script-made click', () => {
    const nb = new FakeNotebook(['widget']);
    const widget = nb.showWidget('widget');
    const made = clickEvent(widget, REQUEST, new Event('click'));
    answerInsertEvent(made.event, nb); // the default reader: the real one
    assert.equal(made.detail.reply?.status, 'error');
    assert.equal(nb.inserts, 0);
  });
});

describe('the widget view and the listener agree on the event', () => {
  interface IWidgetModule {
    dispatchInsert(
      el: EventTarget,
      name: string,
      request: IInsertCellRequest,
      trigger: unknown
    ): IInsertCellEventDetail;
  }

  async function loadWidget(): Promise<IWidgetModule> {
    // The anywidget ESM file ships with the Python package; copy it so Node loads it as ESM.
    const source = join(__dirname, '..', '..', '..', 'gpu_notebook', 'views', 'insert_widget.js');
    const copy = join(__dirname, 'insert_widget.mjs');
    copyFileSync(source, copy);
    return (await import(copy)) as IWidgetModule;
  }

  it('dispatchInsert passes the click along and reports the reply of a listener', async () => {
    const widget = await loadWidget();
    const nb = new FakeNotebook(['widget']);
    const node = new EventTarget();
    const shown = nb.showWidget('widget', { root: node, button: { insertButtonOf: node } });
    node.addEventListener(INSERT_EVENT, event =>
      answerInsertEvent(event as CustomEvent, nb, readFake)
    );
    const detail = widget.dispatchInsert(node, INSERT_EVENT, REQUEST, click(shown.button));
    assert.equal(detail.handled, true);
    assert.equal(detail.reply?.status, 'inserted');
    assert.equal(nb.inserts, 1);
  });

  it('dispatchInsert reports handled=false when nothing listens', async () => {
    const widget = await loadWidget();
    const detail = widget.dispatchInsert(new EventTarget(), INSERT_EVENT, REQUEST, null);
    assert.equal(detail.handled, false);
    assert.equal(detail.reply, null);
  });
});
