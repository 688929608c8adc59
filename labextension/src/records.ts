/**
 * The messages between the kernel (gpu_notebook/bridge.py) and this extension.
 *
 * The records, their bounds and the channel names come from one place: bridge.py's msgspec
 * records, written out as bridge.schema.json (JSON Schema) and bridge.types.ts (types generated
 * from it); tests/test_bridge.py fails when either drifts. Every request is validated against that
 * schema here, so nothing this side accepts says more than the Python side defines.
 */

import schema from './bridge.schema.json';
import { IInsertCellReply, IInsertCellRequest } from './bridge.types';

export { CELL_METADATA_KEY, COMM_TARGET, INSERT_EVENT } from './bridge.types';
export type { IInsertCellReply, IInsertCellRequest } from './bridge.types';

/** bridge.InsertStatus */
export type InsertStatus = IInsertCellReply['status'];

/**
 * The detail of the INSERT_EVENT: the request, plus the two fields the extension fills in
 * synchronously so the widget knows an extension answered (bridge module docstring), and the
 * user's click that made the widget dispatch it (the extension answers only such a click).
 */
export interface IInsertCellEventDetail extends IInsertCellRequest {
  handled: boolean;
  reply: IInsertCellReply | null;
  trigger: Event | null;
}

/** The fields of the detail besides the request's. */
export const EVENT_ONLY_FIELDS: ReadonlyArray<
  Exclude<keyof IInsertCellEventDetail, keyof IInsertCellRequest>
> = ['handled', 'reply', 'trigger'];

/** What an inserted cell keeps in its metadata under CELL_METADATA_KEY. */
export interface IInsertedCellMetadata {
  request_id: string;
  title: string;
}

/** The subset of JSON Schema msgspec writes for our records. */
interface IPropertySchema {
  type?: string;
  anyOf?: IPropertySchema[];
  enum?: ReadonlyArray<unknown>;
  pattern?: string;
  maxLength?: number;
}

interface IRecordSchema {
  properties: Record<string, IPropertySchema>;
  required: ReadonlyArray<string>;
  additionalProperties: boolean;
}

const DEFS = schema.$defs as unknown as Record<
  'InsertCellRequest' | 'InsertCellReply',
  IRecordSchema
>;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON Schema counts characters (code points); a JS string's length counts UTF-16 units. */
function codePoints(text: string): number {
  let count = 0;
  for (const _ of text) {
    count++;
  }
  return count;
}

/** Why `value` does not match `prop`, or null when it does. */
function mismatch(value: unknown, prop: IPropertySchema): string | null {
  if (prop.anyOf !== undefined) {
    const reasons = prop.anyOf.map(member => mismatch(value, member));
    return reasons.includes(null) ? null : reasons.join(', or ');
  }
  if (prop.enum !== undefined) {
    return prop.enum.includes(value) ? null : `expected one of ${JSON.stringify(prop.enum)}`;
  }
  if (prop.type === 'null') {
    return value === null ? null : 'expected null';
  }
  if (prop.type === 'string') {
    if (typeof value !== 'string') {
      return 'expected a string';
    }
    // The length is checked first: a bounded string is cheap to match.
    if (
      prop.maxLength !== undefined &&
      value.length > prop.maxLength &&
      codePoints(value) > prop.maxLength
    ) {
      return `expected at most ${prop.maxLength} characters`;
    }
    if (prop.pattern !== undefined && !new RegExp(prop.pattern, 'u').test(value)) {
      return `expected a string matching ${prop.pattern}`;
    }
    return null;
  }
  return `no check for schema ${JSON.stringify(prop)}`;
}

/**
 * Check `value` against the schema of record `name`: exactly its fields, each within bounds.
 *
 * @throws Error naming the missing, unknown or mismatched fields.
 */
export function checkRecord(name: keyof typeof DEFS, value: unknown): Record<string, unknown> {
  const record = DEFS[name];
  if (!isRecord(value)) {
    throw new Error(`${name}: expected an object`);
  }
  const missing = record.required.filter(field => !(field in value));
  const extra = record.additionalProperties
    ? []
    : Object.keys(value).filter(key => !(key in record.properties));
  if (missing.length > 0 || extra.length > 0) {
    throw new Error(
      `${name}: missing fields [${missing.join(', ')}], unknown fields [${extra.join(', ')}]`
    );
  }
  for (const [field, prop] of Object.entries(record.properties)) {
    const why = mismatch(value[field], prop);
    if (why !== null) {
      throw new Error(`${name}.${field}: ${why}`);
    }
  }
  return value;
}

/**
 * Parse a request (bridge.InsertCellRequest.from_dict): exactly its fields, within bounds.
 *
 * @throws Error saying which field is wrong.
 */
export function parseInsertCellRequest(value: unknown): IInsertCellRequest {
  const { request_id, cell_id, source, title } = checkRecord('InsertCellRequest', value);
  // checkRecord proved the types; copying drops nothing (no other field exists).
  return { request_id, cell_id, source, title } as IInsertCellRequest;
}

/** A reply as the kernel will accept it (bridge.InsertCellReply.from_dict). */
export function checkInsertCellReply(reply: IInsertCellReply): IInsertCellReply {
  checkRecord('InsertCellReply', reply);
  return reply;
}

/** The request_id of a message that failed to parse, when it has a usable one. */
export function requestIdOf(value: unknown): string {
  return isRecord(value) && typeof value.request_id === 'string' && value.request_id.length <= 64
    ? value.request_id
    : '';
}

/** Read the request id an earlier insertion left in a cell's metadata, or null. */
export function insertedRequestId(metadata: unknown): string | null {
  return isRecord(metadata) && typeof metadata.request_id === 'string' ? metadata.request_id : null;
}
