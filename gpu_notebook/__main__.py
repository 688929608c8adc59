"""``python -m gpu_notebook ...`` is the ``gpucheck`` command."""

import sys

from gpu_notebook.cli import main

sys.exit(main())
