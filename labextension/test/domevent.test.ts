import assert from 'node:assert/strict';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { answerInsertEvent } from '../src/domevent';
import { IInsertCellEventDetail, IInsertCellRequest, INSERT_EVENT } from '../src/records';
import { FakeNotebook } from './fakes';

const REQUEST: IInsertCellRequest = {
  request_id: 'd1',
  cell_id: null,
  source: '# gpucheck fix: workers\nx = 1\n',
  title: 'workers'
};

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

describe('answerInsertEvent', () => {
  it('inserts below the enclosing cell and marks the event handled with the reply', () => {
    const nb = new FakeNotebook(['above', 'widget', 'below']);
    const detail: IInsertCellEventDetail = { ...REQUEST, handled: false, reply: null };
    const event = fakeEvent(detail, nb.nodeOf('widget'));
    assert.equal(answerInsertEvent(event, nb), true);
    assert.deepEqual(nb.ids(), ['above', 'widget', 'new-0', 'below']);
    assert.equal(detail.handled, true);
    assert.equal(detail.reply?.status, 'inserted');
    assert.equal(detail.reply?.request_id, 'd1');
    assert.equal(event.prevented, true);
    assert.equal(event.stopped, true);
  });

  it('answers a second click with the same request id as duplicate', () => {
    const nb = new FakeNotebook(['widget']);
    answerInsertEvent(fakeEvent({ ...REQUEST, handled: false, reply: null }, nb.nodeOf('widget')), nb);
    const detail: IInsertCellEventDetail = { ...REQUEST, handled: false, reply: null };
    answerInsertEvent(fakeEvent(detail, nb.nodeOf('widget')), nb);
    assert.equal(detail.reply?.status, 'duplicate');
    assert.equal(nb.inserts, 1);
  });

  it('leaves foreign or already answered events alone', () => {
    const nb = new FakeNotebook(['widget']);
    const foreign = fakeEvent({ something: 'else' }, nb.nodeOf('widget'));
    assert.equal(answerInsertEvent(foreign, nb), false);
    assert.equal(foreign.prevented, false);
    const answered = fakeEvent({ ...REQUEST, handled: true, reply: null }, nb.nodeOf('widget'));
    assert.equal(answerInsertEvent(answered, nb), false);
    assert.equal(nb.inserts, 0);
  });

  it('marks a malformed request handled with an error reply (the widget then shows the copy path)', () => {
    const nb = new FakeNotebook(['widget']);
    const detail = { ...REQUEST, title: 7, handled: false, reply: null };
    answerInsertEvent(fakeEvent(detail, nb.nodeOf('widget')), nb);
    assert.equal(detail.handled, true);
    assert.equal((detail.reply as { status: string } | null)?.status, 'error');
    assert.equal(nb.inserts, 0);
  });
});

describe('the widget view and the listener agree on the event', () => {
  interface IWidgetModule {
    dispatchInsert(el: EventTarget, name: string, request: IInsertCellRequest): IInsertCellEventDetail;
  }

  async function loadWidget(): Promise<IWidgetModule> {
    // The anywidget ESM file ships with the Python package; copy it so Node loads it as ESM.
    const source = join(__dirname, '..', '..', '..', 'gpu_notebook', 'views', 'insert_widget.js');
    const copy = join(__dirname, 'insert_widget.mjs');
    copyFileSync(source, copy);
    return (await import(copy)) as IWidgetModule;
  }

  it('dispatchInsert reports the reply of a listener', async () => {
    const widget = await loadWidget();
    const nb = new FakeNotebook(['widget']);
    const node = new EventTarget();
    nb.cells[0].node = node;
    node.addEventListener(INSERT_EVENT, event => answerInsertEvent(event as CustomEvent, nb));
    const detail = widget.dispatchInsert(node, INSERT_EVENT, REQUEST);
    assert.equal(detail.handled, true);
    assert.equal(detail.reply?.status, 'inserted');
    assert.equal(nb.inserts, 1);
  });

  it('dispatchInsert reports handled=false when nothing listens', async () => {
    const widget = await loadWidget();
    const detail = widget.dispatchInsert(new EventTarget(), INSERT_EVENT, REQUEST);
    assert.equal(detail.handled, false);
    assert.equal(detail.reply, null);
  });
});
