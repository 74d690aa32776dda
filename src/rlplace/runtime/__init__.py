"""rlplace.runtime"""
