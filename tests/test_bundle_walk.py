"""What a kernel issues when it runs, read from its final bundles (inspector/libtpu/bundle_walk.py):
loops at their trip counts, guarded regions skipped or run. No libtpu needed: the listings are
written here in libtpu 0.0.42.1's format, and one is its own (tests/data/libtpu)."""
from __future__ import annotations

import pathlib

from inspector.libtpu.bundle_walk import walk
from inspector.libtpu.dumps import read_bundles

LEGEND = """= control target key start
LH: loop header
LB: loop body
LE: loop exit
PB: predicated region body
PF: predicated region fallthrough
CT: control target
= control target key end

"""

# a loop of 10 trips whose body skips two bundles when %p1 holds (a pl.when), the branch's delay
# slot (an empty bundle) run either way
GUARDED_LOOP = LEGEND + """     0   :  { %s1 = smov 0 }
   0x1 LB: > { %s2 = sadd.s32 1, %s1 } /* Start region 5 */
   0x2   : > { %3 = sbr.rel (%p1) target = $region9 }
   0x3   :  {}
   0x4   : > { %v4 = vadd.f32 %v1, %v2 }
   0x5   : > { %v5 = vadd.f32 %v1, %v2 }
   0x6 PF: > { %v6 = vmul.f32 %v1, %v2 } /* Start/End empty region 9 */
   0x7   : > { %p7 = scmp.ge.s32.totalorder %s2, 10 /* loop exit test */ }
   0x8   : > { %8 = sbr.rel (!%p7) target = $region5 }
   0x9   :  { %9 = vnop }
"""


def test_a_guarded_loop_at_its_trip_count():
    w = walk(read_bundles(GUARDED_LOOP))
    assert [(l.start, l.end, l.depth, l.trips) for l in w.loops] == [(1, 9, 1, 10)]
    assert w.bundles == 10 and w.outer_trips == 10
    assert (w.least, w.most) == (1 + 10 * 6 + 1, 1 + 10 * 8 + 1)  # the guarded two skipped, or run
    assert (w.outer_least, w.outer_most) == (6, 8)
    assert w.most_at(4) == 1 + 4 * 8 + 1  # the grid cut to 4 trips
    assert w.unknown_trips == 0


def test_a_loop_whose_bound_is_a_register_counts_once():
    text = GUARDED_LOOP.replace("%s2, 10 /* loop exit test */", "%s2, %s3 /* loop exit test */")
    w = walk(read_bundles(text))
    assert w.unknown_trips == 1 and w.most == 1 + 8 + 1


def test_nested_loops_multiply():
    """A loop in a loop, the inner one closed by a branch whose predicate compares the counter
    with 32 (no "loop exit test" mark: a fori_loop of the kernel's body)."""
    inner = LEGEND + """     0   :  { %s1 = smov 0 }
   0x1 LB: > { %s2 = sadd.s32 1, %s1 } /* Start region 3 */
   0x2 LB: >> { %v3 = vadd.f32 %v1, %v2  ;;  %p4 = scmp.ge.s32.totalorder %s5, 32 } /* Start region 7 */
   0x3   : > { %8 = sbr.rel (!%p4) target = $region7 }
   0x4   : > { %p6 = scmp.ge.s32.totalorder %s2, 8 /* loop exit test */ }
   0x5   : > { %9 = sbr.rel (!%p6) target = $region3 }
   0x6   :  { %10 = vnop }
"""
    w = walk(read_bundles(inner))
    assert sorted((l.depth, l.trips) for l in w.loops) == [(1, 8), (2, 32)]
    assert w.most == 1 + 8 * (1 + 32 * 2 + 2) + 1


def test_libtpus_own_listing_is_walked():
    """The matmul excerpt of tests/data/libtpu (its first bundles, through the grid loop's first
    MXU pops): read without a guess, every bundle counted at least once."""
    text = (pathlib.Path(__file__).parent / "data/libtpu/matmul_v5e-final_bundles.txt").read_text()
    bundles = read_bundles(text)
    w = walk(bundles)
    assert w.bundles == len(bundles) and w.least <= w.most
    assert w.least >= len([b for b in bundles if b.depth == 0])
