import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { insertBelow, insertInNotebooks } from '../src/insert';
import { IInsertCellRequest } from '../src/records';
import { FakeNotebook } from './fakes';

const SOURCE = '# gpucheck fix: use 4 DataLoader workers\nloader = make(num_workers=4)\n';

function request(overrides: Partial<IInsertCellRequest> = {}): IInsertCellRequest {
  return { request_id: 'r1', cell_id: 'profiled', source: SOURCE, title: 'workers', ...overrides };
}

describe('insertBelow', () => {
  it('inserts one unexecuted code cell directly below the cell with the id', () => {
    const nb = new FakeNotebook(['above', 'profiled', 'below']);
    const reply = insertBelow(nb, request());
    assert.deepEqual(reply, {
      request_id: 'r1',
      status: 'inserted',
      message: 'inserted as cell 3, below cell 2'
    });
    assert.deepEqual(nb.ids(), ['above', 'profiled', 'new-0', 'below']);
    const inserted = nb.cells[2];
    assert.equal(inserted.source, SOURCE);
    assert.equal(inserted.cellType, 'code');
    assert.equal(inserted.executed, false);
    assert.deepEqual(inserted.metadata, { gpu_notebook: { request_id: 'r1', title: 'workers' } });
  });

  it('leaves the other cells as they were', () => {
    const nb = new FakeNotebook(['above', 'profiled', 'below']);
    const before = nb.cells.map(cell => ({ ...cell }));
    insertBelow(nb, request());
    assert.deepEqual(
      nb.cells.filter(cell => !cell.id.startsWith('new-')),
      before
    );
  });

  it('inserts a request id once and answers duplicate afterwards', () => {
    const nb = new FakeNotebook(['above', 'profiled', 'below']);
    insertBelow(nb, request());
    const second = insertBelow(nb, request());
    assert.equal(second.status, 'duplicate');
    assert.equal(second.request_id, 'r1');
    assert.match(second.message, /cell 3 already holds this fix/);
    assert.equal(nb.inserts, 1);
  });

  it('inserts again for another request id', () => {
    const nb = new FakeNotebook(['profiled']);
    insertBelow(nb, request());
    insertBelow(nb, request({ request_id: 'r2' }));
    assert.equal(nb.inserts, 2);
    assert.deepEqual(nb.ids(), ['profiled', 'new-1', 'new-0']);
  });

  it('answers error and inserts nothing when the cell id is unknown or missing', () => {
    const nb = new FakeNotebook(['above', 'below']);
    const unknown = insertBelow(nb, request());
    assert.equal(unknown.status, 'error');
    assert.match(unknown.message, /no cell has id profiled/);
    const missing = insertBelow(nb, request({ cell_id: null }));
    assert.equal(missing.status, 'error');
    assert.match(missing.message, /names no cell/);
    assert.equal(nb.inserts, 0);
  });
});

describe('insertInNotebooks', () => {
  it('inserts in the notebook that holds the target cell', () => {
    const first = new FakeNotebook(['x']);
    const second = new FakeNotebook(['profiled']);
    const reply = insertInNotebooks([first, second], request());
    assert.equal(reply.status, 'inserted');
    assert.equal(first.inserts, 0);
    assert.equal(second.inserts, 1);
  });

  it('answers duplicate when any notebook holds the request already', () => {
    const first = new FakeNotebook(['profiled']);
    const second = new FakeNotebook(['profiled']);
    insertBelow(second, request());
    assert.equal(insertInNotebooks([first, second], request()).status, 'duplicate');
    assert.equal(first.inserts, 0);
  });

  it('answers error without notebooks', () => {
    const reply = insertInNotebooks([], request());
    assert.deepEqual(reply, {
      request_id: 'r1',
      status: 'error',
      message: 'nothing inserted: no open notebook uses this kernel'
    });
  });
});
