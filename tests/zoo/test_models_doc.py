"""docs/models.md is the zoo's matrix as the tests run it."""

from render_models_doc import DOC, render


def test_the_supported_models_page_is_rendered_from_the_zoo_matrix():
    assert DOC.read_text() == render(), "docs/models.md is stale: run `python tests/zoo/render_models_doc.py`"
