"""Name globs (shadow_twin/common/globs.py): case-sensitive, in order, first or no match."""

from __future__ import annotations

from shadow_twin.common.globs import first_index, first_match, matches, matching, unmatched

NAMES = ['rh_FFJ1', 'rh_FFJ2', 'rh_MFJ1', 'shoulder_pan_joint']


def test_matching_keeps_the_names_order_and_is_case_sensitive():
    assert matching(NAMES, ['rh_MF*', 'rh_FFJ?']) == ['rh_FFJ1', 'rh_FFJ2', 'rh_MFJ1']
    assert matching(NAMES, ['RH_FF*']) == [] and not matches('rh_FFJ1', ['RH_*'])
    assert matches('shoulder_pan_joint', ['*_pan_*']) and not matches('shoulder_pan_joint', [])


def test_the_first_glob_wins_and_a_miss_gives_the_default():
    table = {'rh_FFJ*': 1.0, 'rh_*': 2.0}
    assert first_match('rh_FFJ3', table) == 1.0 and first_match('rh_THJ1', table) == 2.0
    assert first_match('elbow_joint', table, 7.0) == 7.0 and first_match('elbow_joint', table) is None
    assert first_match('rh_FFJ3', [('rh_*', 'a'), ('rh_FF*', 'b')]) == 'a'
    assert first_index('rh_THJ1', ['rh_FF*', 'rh_T*', '*']) == 1 and first_index('x', ['rh_*']) is None


def test_unmatched_names_the_globs_that_match_nothing():
    assert unmatched(['rh_FF*', 'rh_XX*', 'elbow'], NAMES) == ['rh_XX*', 'elbow']
