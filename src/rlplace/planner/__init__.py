"""rlplace.planner"""
