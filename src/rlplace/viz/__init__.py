"""rlplace.viz"""
