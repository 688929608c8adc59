import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import schema from '../src/bridge.schema.json';
import {
  checkInsertCellReply,
  COMM_TARGET,
  EVENT_ONLY_FIELDS,
  insertedRequestId,
  parseInsertCellRequest
} from '../src/records';

describe('parseInsertCellRequest', () => {
  it('accepts exactly the fields of the schema, cell_id may be null', () => {
    const request = { request_id: 'a', cell_id: null, source: 's', title: 't' };
    assert.deepEqual(parseInsertCellRequest(request), request);
    assert.deepEqual(Object.keys(request), schema.$defs.InsertCellRequest.required);
  });

  it('names the missing and the unknown fields', () => {
    assert.throws(
      () => parseInsertCellRequest({ request_id: 'a', source: 's', title: 't', x: 1 }),
      /missing fields \[cell_id\], unknown fields \[x\]/
    );
  });

  it('rejects an empty or odd request id, and non-objects', () => {
    const request = { request_id: '', cell_id: null, source: '', title: '' };
    assert.throws(() => parseInsertCellRequest(request), /request_id/);
    assert.throws(() => parseInsertCellRequest({ ...request, request_id: "a')" }), /request_id/);
    assert.throws(() => parseInsertCellRequest(null), /expected an object/);
    assert.throws(() => parseInsertCellRequest(['a']), /expected an object/);
  });

  it('counts the source bound in characters, as Python does', () => {
    const max = schema.$defs.InsertCellRequest.properties.source.maxLength;
    const request = { request_id: 'a', cell_id: null, title: '' };
    // An emoji is one character in Python and two UTF-16 units here.
    assert.doesNotThrow(() => parseInsertCellRequest({ ...request, source: '😀'.repeat(max) }));
    assert.throws(
      () => parseInsertCellRequest({ ...request, source: 'x'.repeat(max + 1) }),
      /source/
    );
  });
});

describe('checkInsertCellReply', () => {
  it('rejects a status outside the enum of the schema', () => {
    assert.throws(
      () => checkInsertCellReply({ request_id: 'a', status: 'done' as 'error', message: '' }),
      /status: expected one of/
    );
  });
});

describe('the contract', () => {
  it('takes the channel names from the schema', () => {
    assert.equal(COMM_TARGET, schema.constants.COMM_TARGET);
  });

  it('adds only handled, reply and trigger to the request in the event detail', () => {
    assert.deepEqual([...EVENT_ONLY_FIELDS].sort(), ['handled', 'reply', 'trigger']);
  });
});

describe('insertedRequestId', () => {
  it('reads the request id from cell metadata and ignores anything else', () => {
    assert.equal(insertedRequestId({ request_id: 'r', title: 't' }), 'r');
    assert.equal(insertedRequestId(undefined), null);
    assert.equal(insertedRequestId({ request_id: 3 }), null);
  });
});
