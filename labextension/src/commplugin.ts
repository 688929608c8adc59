/** Registers the COMM_TARGET on every notebook's kernel, again after each kernel change. */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

import { NotebookPanelAdapter } from './adapter';
import { answerCommOpen } from './comm';
import { COMM_TARGET } from './records';

export function activateCommChannel(_app: JupyterFrontEnd, tracker: INotebookTracker): void {
  // A restart keeps the connection (and its comm targets); a kernel change brings a new one.
  const registered = new WeakSet<Kernel.IKernelConnection>();

  const notebooksOf = (kernel: Kernel.IKernelConnection): NotebookPanelAdapter[] =>
    tracker
      .filter(panel => panel.sessionContext.session?.kernel === kernel)
      .map(panel => new NotebookPanelAdapter(panel));

  const register = (kernel: Kernel.IKernelConnection | null | undefined): void => {
    if (!kernel || registered.has(kernel)) {
      return;
    }
    registered.add(kernel);
    kernel.registerCommTarget(COMM_TARGET, (comm, msg) => {
      answerCommOpen(comm, msg.content.data, notebooksOf(kernel));
    });
  };

  const watch = (panel: NotebookPanel): void => {
    register(panel.sessionContext.session?.kernel);
    panel.sessionContext.kernelChanged.connect((_, change) => register(change.newValue));
  };

  tracker.forEach(watch);
  tracker.widgetAdded.connect((_, panel) => watch(panel));
}
