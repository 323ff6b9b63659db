"""web/reader"""
