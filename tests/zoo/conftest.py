import sys
from pathlib import Path

# The zoo's modules import each other by name (pytest's importlib mode puts no test folder on sys.path).
sys.path.insert(0, str(Path(__file__).parent))
