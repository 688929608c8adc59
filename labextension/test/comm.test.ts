import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { answerCommOpen, IReplyChannel } from '../src/comm';
import { FakeNotebook } from './fakes';

class FakeComm implements IReplyChannel {
  sent: unknown[] = [];
  closed = 0;
  send(data: unknown): void {
    if (this.closed > 0) {
      throw new Error('send after close');
    }
    this.sent.push(data);
  }
  close(): void {
    this.closed++;
  }
}

const DATA = {
  request_id: 'c1',
  cell_id: 'target',
  source: '# gpucheck fix: pin memory\nx = 1\n',
  title: 'pin memory'
};

describe('answerCommOpen', () => {
  it('inserts below the cell id, sends exactly one reply with the record fields, then closes', () => {
    const nb = new FakeNotebook(['above', 'target', 'below']);
    const comm = new FakeComm();
    answerCommOpen(comm, DATA, [nb]);
    assert.deepEqual(nb.ids(), ['above', 'target', 'new-0', 'below']);
    assert.equal(comm.sent.length, 1);
    const reply = comm.sent[0] as Record<string, unknown>;
    assert.deepEqual(Object.keys(reply).sort(), ['message', 'request_id', 'status']);
    assert.equal(reply.request_id, 'c1');
    assert.equal(reply.status, 'inserted');
    assert.equal(comm.closed, 1);
  });

  it('answers duplicate to a repeated request id', () => {
    const nb = new FakeNotebook(['target']);
    answerCommOpen(new FakeComm(), DATA, [nb]);
    const comm = new FakeComm();
    answerCommOpen(comm, DATA, [nb]);
    assert.equal((comm.sent[0] as { status: string }).status, 'duplicate');
    assert.equal(nb.inserts, 1);
  });

  it('answers error to a malformed request and still closes', () => {
    const nb = new FakeNotebook(['target']);
    const comm = new FakeComm();
    const reply = answerCommOpen(comm, { ...DATA, source: 42 }, [nb]);
    assert.equal(reply.status, 'error');
    assert.equal(reply.request_id, 'c1');
    assert.match(reply.message, /source/);
    assert.equal(comm.closed, 1);
    assert.equal(nb.inserts, 0);
  });

  it('rejects unknown fields like the Python record does', () => {
    const comm = new FakeComm();
    const reply = answerCommOpen(comm, { ...DATA, extra: true }, [new FakeNotebook(['target'])]);
    assert.equal(reply.status, 'error');
    assert.match(reply.message, /unknown fields \[extra\]/);
  });
});
