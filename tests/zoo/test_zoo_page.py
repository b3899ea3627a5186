"""docs/zoo.rst's first example runs as written (tests/doc_examples.py) and prints what the page shows: a Llama
built from its config at every width, μP applied, and the coordinate check passed. The page's transfer call is the
study ``benchmarks/zoo_study.py transfer llama`` stores (minutes of CPU, not a test)."""
import doc_examples as D

PAGE = "docs/zoo.rst"


def test_the_zoo_page_example_runs_as_written(tmp_path, one_thread):
    blocks = [b for b in D.blocks(PAGE) if b.lang == "python"]
    assert len(blocks) == 2 and blocks[1].code.lstrip().startswith("t = lt.transfer(f, \"muP\"")
    D.prepare_folder(tmp_path)
    ns = {"__name__": "__main__"}
    printed = D.run_block(blocks[0], tmp_path, ns)          # compared with the page's text block
    assert printed.strip() == "True"
    P, r = ns["P"], ns["r"]
    assert r.passed and r.tests > 100, r.to_markdown()
    assert {a.site.name for a in P.attention} == {f"model.layers.{i}.self_attn:explicit" for i in (0, 1)}
