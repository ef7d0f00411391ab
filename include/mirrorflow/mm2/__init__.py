"""MirrorMaker 2's own wire formats and behaviour, kept byte- and rule-exact.

mirrorflow writes MM2's internal topics so that MM2's tools read them and a flow can move
between MM2 and mirrorflow without re-copying; `baseline` reproduces MM2's lossy offset
translation so benchmarks can measure mirrorflow's exact translation against it.
"""
