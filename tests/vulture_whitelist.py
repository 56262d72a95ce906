"""Names that look unused to vulture but are used where it cannot see (tests/test_dead_code.py).

Each group says where its names are read. A name that is really dead is removed from the code,
never added here.
"""

# ruff: noqa: B018
# mypy: ignore-errors

from problems.compositional import LinearCompositional
from problems.minimax import QuadraticMinimax
from problems.quadratic_bilevel import QuadraticBilevel
from reports.claim_rows import Row
from reports.claims_table import ClaimSection
from reports.page_context import Erratum
from reports.page_context import Page
from reports.page_context import VerdictGroup
from reports.section_model import Table
from testbed.decentralized.ledger import GraphLedger
from testbed.info import EstimatorInfo
from theory_checks.aggitd.constants import AggITDConstants

# Read by the problems' id templates (``"...d{dims_text}..."``, ``"...{scales_suffix}"``), which
# format with the instance's attributes.
LinearCompositional.dims_text
QuadraticBilevel.scales_suffix

# Declared for the reader and mypy; set by QuadraticFamily's constructor and read by
# ClientArrayFamily._sampled by name (``f"{name}_samples"``).
QuadraticBilevel.c_samples
QuadraticBilevel.e_samples
QuadraticMinimax.P_samples
QuadraticMinimax.e_samples

# Read by the Jinja templates of reports/templates/ (report.html.j2, report.md.j2, macros).
ClaimSection.counterexample_files
ClaimSection.worst_title
ClaimSection.alt
ClaimSection.row_anchor
Row.verdict_class
Row.line_statement
Row.reading_verdicts
VerdictGroup.css
VerdictGroup.badge
Erratum.corrections
Page.headline
Page.table_head
Page.fit_head
Page.table_numbers
Page.unfilled
Table.folded

# Written into the ledger's record by name (GraphLedger._ARRAYS) and read from the record.
GraphLedger.messages_sent

# A declared fact of an entry (testbed/entries/classical.py, hgp.py): a plugin author reads it in
# ``testbed list --verbose``.
EstimatorInfo.closed_form_only

# Assumption 2's Lipschitz constant of grad_x y*(x), kept beside the other constants of AggITD's
# Theorem 1 (whose rho = 0 cases make it vanish; theory_checks/aggitd/thm1/ says so).
AggITDConstants.L_yx

# Named in a plugin's claims file as a string ("theory_checks.classical.cg:check_normal_cg_exact",
# integrations/torchopt/testbed_torchopt/claims.toml), which the registry imports by name.
from theory_checks.classical import cg  # noqa: E402

cg.check_normal_cg_exact

# A field of the fit's record: the number of points behind its interval.
from theory_checks.stats import LinearFit  # noqa: E402

LinearFit.num_points

# Fields of a claim's results file (results_format/claim_record.py), written and read by their
# names (Record.to_json, Record.from_json): what drawn cases fell outside the hypotheses, which
# `testbed check` prints, and the seal that results_format.validation.seal adds.
from results_format.claim_record import ClaimRecord  # noqa: E402

ClaimRecord.n_outside_hypotheses
ClaimRecord.outside_hypotheses
ClaimRecord.content_sha256
