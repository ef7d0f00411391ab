"""MirrorMaker 2's own wire formats and behaviour, kept byte- and rule-exact.

mirrorflow writes MM2's internal topics so that MM2's tools read them and a flow can move
between MM2 and mirrorflow without re-copying. Comparisons with MM2's behaviour run real MM2
(localkafka.mirrormaker), never a re-implementation.
"""
