"""Jobs: spec -> episodes -> datasets; CLI; export; evaluation."""
