import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';

import { activateCommChannel } from './commplugin';
import { activateEventChannel } from './eventplugin';

const commChannel: JupyterFrontEndPlugin<void> = {
  id: 'gpu-notebook:insert-cell-comm',
  description: 'Inserts %%gpucheck fixes as new cells on request of the kernel (comm).',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => activateCommChannel(app, tracker)
};

const eventChannel: JupyterFrontEndPlugin<void> = {
  id: 'gpu-notebook:insert-cell-event',
  description: 'Inserts %%gpucheck fixes as new cells when the fix widget asks (DOM event).',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => activateEventChannel(app, tracker)
};

export default [commChannel, eventChannel];
