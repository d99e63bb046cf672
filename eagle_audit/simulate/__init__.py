"""The accept-length simulation, a floor both ``accept-rate`` (:mod:`eagle_audit.accept`) and the fingerprint's
confirmation (:mod:`eagle_audit.fingerprint.confirm`) stand on: ``accept`` the cases (prompt, the target's greedy
continuation, its states) and the verify walk of chains and trees, ``tree`` the engines' draft trees and their
attention modes, ``targetrun`` the target's states a draft reads at each position. Stands on ``runtime/`` (the
draft forwards) and ``source/`` (the states), and on nothing above them.
"""
