"""How much text a lossy decoding loses (``lost_bytes``, ``lost_words``): aligned line by line, then word by word,
then byte by byte."""

import random

from tokenizers_study.base import ALIGN_LINES, lost_bytes, lost_words


def test_each_changed_word_counts_the_bytes_it_lost():
    assert lost_bytes("abcdefghij klm nop", "abcdefghiX klX noX") == 3  # one byte of each word, not whole words
    assert lost_words("abcdefghij klm nop", "abcdefghiX klX noX") == 3


def test_a_replaced_run_of_words_is_compared_word_for_word():
    # "ab cd" came back as "abc d": "ab" lost nothing, "cd" lost its "c" (the runs joined would be identical)
    assert lost_bytes("x ab cd", "x abc d") == 1
    assert lost_words("x ab cd", "x abc d") == 2


def test_words_too_long_to_align_count_as_lost_whole():
    word = "".join(random.Random(0).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10_000))
    assert lost_bytes(word, word[:1000]) == 9000  # 10**7 byte pairs: still aligned, the 1,000 kept are found
    assert lost_bytes(word, word[:1001]) == 10_000  # 10,010,000 pairs: too many to align, all of it lost
    # the changed words either side of it count too (one byte each)
    assert lost_bytes(f"ab {word} cd", f"aX {word[:1001]} cX") == 10_002


def test_words_and_bytes_are_aligned_exactly_among_repeats():
    # difflib's junk heuristic (popular elements never anchor a match) is off within a line: a word moved from
    # the start of a line of 300 words to its end loses 3 bytes and one word, not the 299 repeats around it
    words = ["cat"] + ["the"] * 299
    text, back = " ".join(words), " ".join(words[1:] + ["cat"])
    assert lost_bytes(text, back) == 3
    assert lost_words(text, back) == 1
    assert lost_bytes("c" + "ab" * 150, "ab" * 150 + "c") == 1  # and a byte moved within a 301-byte word


def test_a_changed_word_among_many_repeats_is_one_lost_word():
    words = ["the"] * 300
    words[150] = "cat"
    text = " ".join(words)
    assert lost_words(text, text.replace("cat", "dog")) == 1
    assert lost_bytes(text, text.replace("cat", "dog")) == 3


def test_beyond_align_lines_lines_repeated_over_one_percent_never_anchor_the_alignment():
    # The price of a linear alignment of a large split (WikiText repeats its blank line hundreds of thousands of
    # times): beyond ALIGN_LINES lines, a line moved across 150 repeats of another is counted with all of them.
    def lost(n_lines: int) -> tuple[int, int]:
        distinct = [f"line {i}" for i in range(n_lines - 151)]  # the last, dropped by decoding: "line 98xx"
        text = "\n".join(["cat"] + ["X"] * 150 + distinct)
        back = "\n".join(["X"] * 150 + ["cat"] + distinct[:-1])
        return lost_bytes(text, back), lost_words(text, back)

    assert lost(ALIGN_LINES) == (3 + 9 + 1, 1 + 2)  # exact: "cat", the dropped line and its line break
    assert lost(ALIGN_LINES + 1) == (150 + 9 + 1, 150 + 2)  # the 150 repeats instead of "cat"


def test_the_aligned_pairs_are_only_those_that_differ():
    from tokenizers_study.base import _changed_pairs

    words, back = "a b c d e".split(), "a x c d y z".split()
    assert list(_changed_pairs(words, back, " ")) == [("b", "x"), ("e", "y z")]  # a, c and d are equal: not listed
