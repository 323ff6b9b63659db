"""generate"""
