"""The claims the FedMSA authors' code is decided against (entry point ``testbed.claims``),
read from ``claims.toml`` beside this module."""

from pathlib import Path

from theory_checks.claim_file import load_claims

CLAIMS = load_claims(Path(__file__).with_name("claims.toml"))
