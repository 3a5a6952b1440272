"""``python -m trainium_eks.rehearsal.fake_commands <aws|helm|kubectl> <args>``: run one fake command."""

import sys

from trainium_eks.rehearsal.fake_commands.recording import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
