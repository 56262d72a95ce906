"""The researcher's own test: the variant satisfies the claims it declares."""

from testbed_app.testing import assert_claims_hold


def test_my_variant_satisfies_its_declared_claims(tmp_path):
    assert_claims_hold("my-horner-aid", results=tmp_path)
