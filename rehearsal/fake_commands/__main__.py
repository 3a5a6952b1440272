"""``python -m rehearsal.fake_commands <aws|helm|kubectl> <args>``: run one fake command."""

import sys

from rehearsal.fake_commands.recording import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
