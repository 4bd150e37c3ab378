"""The report's tables for a paper: CSV with numbers as numbers, LaTeX with booktabs that pdflatex reads."""

from bench.study.report.export import latex_text, to_csv, to_latex

ROWS = [{"model": "lstm", "tokenizer": "word_open:2048", "bits/byte": "2.5491 ± 0.1162",
         "text 95%": "[2.5159, 2.5802]",
         "word ppl": "9,932.6 [6,529.1, 15,110.2]", "flags": "†✗", "note": "50% & $5 #1 {x} ~^\\"},
        {"model": "*gzip -9*", "tokenizer": "compressor", "bits/byte": "2.6101", "text 95%": "-", "word ppl": "-",
         "flags": "", "note": ""}]
COLUMNS = list(ROWS[0])


def test_csv_splits_values_from_their_intervals_as_plain_numbers():
    lines = to_csv(ROWS, COLUMNS).splitlines()
    assert lines[0] == ("model,tokenizer,bits/byte,bits/byte ±,text 95% low,text 95% high,word ppl,word ppl low,"
                        "word ppl high,flags,note")
    assert lines[1].startswith("lstm,word_open:2048,2.5491,0.1162,2.5159,2.5802,9932.6,6529.1,15110.2,†✗,")
    assert lines[2].startswith("*gzip -9*,compressor,2.6101,,-,,-,,,")


def test_latex_is_a_booktabs_table_with_every_special_character_escaped():
    tex = to_latex(ROWS, COLUMNS, "A caption with 95% and p_value", "tab:main")
    assert tex.count(r"\toprule") == tex.count(r"\midrule") == tex.count(r"\bottomrule") == 1
    assert r"\begin{tabular}{llrrrrr}" in tex and r"\label{tab:main}" in tex
    assert r"2.5491 $\pm$ 0.1162" in tex and r"\textdagger{}$\times$" in tex and "gzip -9 &" in tex
    assert latex_text("50% & $5 #1 {x} ~^\\") == (r"50\% \& \$5 \#1 \{x\} \textasciitilde{}\textasciicircum{}"
                                                  r"\textbackslash{}")
    body = tex.replace(r"\{", "").replace(r"\}", "")
    assert body.count("{") == body.count("}")  # balanced groups
    assert all(ord(ch) < 128 for ch in tex)  # pdflatex without inputenc tricks
