"""rlplace.config"""
