"""Multi-document YAML on stdin -> a JSON array on stdout (empty documents
dropped). Needs PyYAML (Debian: python3-yaml)."""
import json
import sys

import yaml

json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)
