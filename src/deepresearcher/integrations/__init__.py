"""Bridges to other training systems. Each subpackage imports its system lazily, so the default install
never needs it: ``integrations.verl`` runs our agent, tools and reward inside verl on a Ray cluster."""
