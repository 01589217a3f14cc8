"""The scenario framework: the ``Scenario`` / ``FusedScenario`` base classes and registry, option
checks, the shared arena (spawn grid, resets, neighbor features) and the drawable records."""
