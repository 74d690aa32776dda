"""rlplace.ray"""
