import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { insertedRequestId, parseInsertCellRequest } from '../src/records';

describe('parseInsertCellRequest', () => {
  it('accepts exactly the four fields, cell_id may be null', () => {
    const request = { request_id: 'a', cell_id: null, source: 's', title: 't' };
    assert.deepEqual(parseInsertCellRequest(request), request);
  });

  it('names the missing and the unknown fields', () => {
    assert.throws(
      () => parseInsertCellRequest({ request_id: 'a', source: 's', title: 't', x: 1 }),
      /missing fields \[cell_id\], unknown fields \[x\]/
    );
  });

  it('rejects an empty request id and non-objects', () => {
    assert.throws(
      () => parseInsertCellRequest({ request_id: '', cell_id: null, source: '', title: '' }),
      /request_id/
    );
    assert.throws(() => parseInsertCellRequest(null), /expected an object/);
    assert.throws(() => parseInsertCellRequest(['a']), /expected an object/);
  });
});

describe('insertedRequestId', () => {
  it('reads the request id from cell metadata and ignores anything else', () => {
    assert.equal(insertedRequestId({ request_id: 'r', title: 't' }), 'r');
    assert.equal(insertedRequestId(undefined), null);
    assert.equal(insertedRequestId({ request_id: 3 }), null);
  });
});
