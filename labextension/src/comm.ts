/**
 * Comm channel: the kernel opens a comm to COMM_TARGET with an IInsertCellRequest; we insert,
 * answer with one IInsertCellReply and close the comm.
 */

import { insertInNotebooks, INotebookAdapter } from './insert';
import { IInsertCellReply, parseInsertCellRequest, requestIdOf } from './records';

/** The part of a JupyterLab comm (Kernel.IComm) the handler uses. */
export interface IReplyChannel {
  send(data: { request_id: string; status: string; message: string }): unknown;
  close(): unknown;
}

/**
 * Handle one comm_open whose data is the request; always answers, then closes the comm.
 *
 * @param notebooks the notebooks connected to the kernel that opened the comm.
 */
export function answerCommOpen(
  channel: IReplyChannel,
  data: unknown,
  notebooks: ReadonlyArray<INotebookAdapter>
): IInsertCellReply {
  let reply: IInsertCellReply;
  try {
    reply = insertInNotebooks(notebooks, parseInsertCellRequest(data));
  } catch (error) {
    reply = {
      request_id: requestIdOf(data),
      status: 'error',
      message: `malformed request: ${error instanceof Error ? error.message : String(error)}`
    };
  }
  channel.send({ request_id: reply.request_id, status: reply.status, message: reply.message });
  channel.close();
  return reply;
}
