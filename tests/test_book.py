"""The page glue: plain values in, clear errors for what the book cannot print."""

import math

import numpy as np
import pytest

from inferlab import book


def test_numpy_scalars_become_plain_python() -> None:
    out = book.glue(a=np.float64(1.5), b=np.int64(3), c="x")
    assert out == {"a": 1.5, "b": 3, "c": "x"}
    assert type(out["a"]) is float and type(out["b"]) is int


@pytest.mark.parametrize("bad", [math.nan, math.inf, np.float32("nan"), None, [1], True])
def test_rejects_what_cannot_be_printed(bad: object) -> None:
    with pytest.raises(ValueError, match="ttft"):
        book.glue(ttft=bad)


def test_glue_writes_what_myst_nb_reads(tmp_path) -> None:
    import nbformat
    from myst_nb.ext.glue import extract_glue_data_cell
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from inferlab import book\nimport numpy as np\nbook.glue(ratio=np.float64(31.4865), n=37)")])
    NotebookClient(nb, timeout=60, resources={"metadata": {"path": str(tmp_path)}}).execute()
    found = dict(extract_glue_data_cell(nb.cells[0]))
    from myst_nb.ext.glue import GLUE_PREFIX

    assert book.GLUE_PREFIX == GLUE_PREFIX and set(found) == {"ratio", "n"}
    assert found["ratio"]["data"]["text/plain"] == "31.4865" and found["n"]["data"]["text/plain"] == "37"


def test_source_of_reads_a_kernel_without_importing_its_module() -> None:
    import subprocess
    import sys

    text = book.source_of("inferlab.kernels.triton_paged", "_paged_decode")
    assert text.startswith("@triton.jit\ndef _paged_decode(") and "tl.dot" in text
    code = ("import sys; from inferlab import book; book.source_of('inferlab.kernels.triton_paged', '_paged_decode'); "
            "assert not {'torch', 'triton', 'inferlab.kernels.triton_paged'} & set(sys.modules), 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(ValueError, match="name must be a top-level function"):
        book.source_of("inferlab.kernels.triton_paged", "no_such_kernel")
    with pytest.raises(ValueError, match="module must name"):
        book.source_of("inferlab.no_such_module", "x")


def test_number_table_prints_whole_numbers_plainly_and_a_dash_for_missing() -> None:
    import math

    import pandas as pd

    from inferlab.book import number_table

    df = pd.DataFrame({"MiB": [1152.0, 631.125, math.nan], "name": ["a", "b", "c"]}, index=["bf16", "q8_0", "q4_0"])
    out = number_table(df, {"bf16": "BF16"})
    assert out.loc["BF16"].tolist() == ["1152", "a"] and out.loc["q8_0", "MiB"] == "631.125"
    assert out.loc["q4_0", "MiB"] == "–"
    with pytest.raises(ValueError, match="df must be a pandas DataFrame"):
        number_table([1, 2])


@pytest.mark.parametrize("column, header", [
    ("decode_step_s", "decode step (s)"), ("throughput_tok_s", "throughput (tokens/s)"), ("ttft_s", "TTFT (s)"),
    ("peak_hbm_bandwidth_Bps", "peak HBM bandwidth (B/s)"), ("step_read_gb", "step read (GB)"),
    ("positions", "positions"), ("decode_mbu", "decode MBU"), ("_s", "s"),
])
def test_readable_name_writes_a_header_with_its_unit(column: str, header: str) -> None:
    from inferlab.book import readable_name

    assert readable_name(column) == header


def test_readable_name_refuses_what_is_not_a_name() -> None:
    from inferlab.book import readable_name

    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="column"):
            readable_name(bad)
