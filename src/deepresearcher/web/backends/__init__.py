"""web/backends"""
