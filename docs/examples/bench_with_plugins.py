"""The bench command line with this folder's plug-ins registered: every
command, every option. From the checkout:
python docs/examples/bench_with_plugins.py run-matrix CONFIG --jobs 2"""

import sys

import cli  # the `bench` command itself

import nibble  # registers the scheme, here and in every --jobs worker

if __name__ == "__main__":  # what the workers, importing this file, skip
    sys.exit(cli.main())
