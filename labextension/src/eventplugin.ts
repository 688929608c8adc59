/** Listens for the widget's INSERT_EVENT on every notebook panel. */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { NotebookPanelAdapter } from './adapter';
import { answerInsertEvent } from './domevent';
import { INSERT_EVENT } from './records';

export function activateEventChannel(_app: JupyterFrontEnd, tracker: INotebookTracker): void {
  const attached = new WeakSet<NotebookPanel>();

  const attach = (panel: NotebookPanel): void => {
    if (attached.has(panel)) {
      return;
    }
    attached.add(panel);
    const adapter = new NotebookPanelAdapter(panel);
    const listener = (event: Event): void => {
      if (event instanceof CustomEvent) {
        answerInsertEvent(event, adapter);
      }
    };
    panel.node.addEventListener(INSERT_EVENT, listener);
    panel.disposed.connect(() => panel.node.removeEventListener(INSERT_EVENT, listener));
  };

  tracker.forEach(attach);
  tracker.widgetAdded.connect((_, panel) => attach(panel));
}
