/**
 * The messages between the kernel (gpu_notebook/bridge.py) and this extension.
 *
 * Each interface mirrors one Python frozen dataclass field by field (tests/test_bridge.py
 * checks the parity); nothing here says more than the Python side defines.
 */

/** The comm target registered on every notebook kernel (bridge.COMM_TARGET). */
export const COMM_TARGET = 'gpu_notebook.insert_cell';

/** The DOM CustomEvent the InsertFixWidget dispatches (bridge.INSERT_EVENT). */
export const INSERT_EVENT = 'gpu-notebook:insert-cell';

/** Metadata key of an inserted cell (bridge.CELL_METADATA_KEY). */
export const CELL_METADATA_KEY = 'gpu_notebook';

/** bridge.InsertStatus */
export type InsertStatus = 'inserted' | 'duplicate' | 'error';

/** bridge.InsertCellRequest: kernel/widget -> frontend. */
export interface IInsertCellRequest {
  request_id: string;
  cell_id: string | null;
  source: string;
  title: string;
}

/** bridge.InsertCellReply: frontend -> kernel. */
export interface IInsertCellReply {
  request_id: string;
  status: InsertStatus;
  message: string;
}

/**
 * The detail of the INSERT_EVENT: the request, plus the two fields the extension fills in
 * synchronously so the widget knows an extension answered (bridge module docstring).
 */
export interface IInsertCellEventDetail extends IInsertCellRequest {
  handled: boolean;
  reply: IInsertCellReply | null;
}

/** What an inserted cell keeps in its metadata under CELL_METADATA_KEY. */
export interface IInsertedCellMetadata {
  request_id: string;
  title: string;
}

const REQUEST_FIELDS: ReadonlyArray<keyof IInsertCellRequest> = [
  'request_id',
  'cell_id',
  'source',
  'title'
];

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Parse a request (bridge.InsertCellRequest.from_dict): exactly the four fields, typed.
 *
 * @throws Error saying which field is wrong.
 */
export function parseInsertCellRequest(value: unknown): IInsertCellRequest {
  if (!isRecord(value)) {
    throw new Error('InsertCellRequest: expected an object');
  }
  const missing = REQUEST_FIELDS.filter(name => !(name in value));
  const extra = Object.keys(value).filter(
    key => !(REQUEST_FIELDS as ReadonlyArray<string>).includes(key)
  );
  if (missing.length > 0 || extra.length > 0) {
    throw new Error(
      `InsertCellRequest: missing fields [${missing.join(', ')}], unknown fields [${extra.join(', ')}]`
    );
  }
  const { request_id, cell_id, source, title } = value;
  if (typeof request_id !== 'string' || request_id === '') {
    throw new Error('InsertCellRequest.request_id: expected a non-empty string');
  }
  if (cell_id !== null && typeof cell_id !== 'string') {
    throw new Error('InsertCellRequest.cell_id: expected a string or null');
  }
  if (typeof source !== 'string') {
    throw new Error('InsertCellRequest.source: expected a string');
  }
  if (typeof title !== 'string') {
    throw new Error('InsertCellRequest.title: expected a string');
  }
  return { request_id, cell_id, source, title };
}

/** The request_id of a message that failed to parse, when it has a usable one. */
export function requestIdOf(value: unknown): string {
  return isRecord(value) && typeof value.request_id === 'string' ? value.request_id : '';
}

/** Read the request id an earlier insertion left in a cell's metadata, or null. */
export function insertedRequestId(metadata: unknown): string | null {
  return isRecord(metadata) && typeof metadata.request_id === 'string'
    ? metadata.request_id
    : null;
}
