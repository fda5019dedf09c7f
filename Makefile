# The two commands of the README. Both first install whatever is missing (scripts/setup.sh:
# system packages, .venv at the versions of requirements/constraints.txt) and skip that in a
# moment when nothing changed. Without make: scripts/demo.sh, scripts/test.sh.
.PHONY: demo test lock setup

demo:  ## set up, then the main job: synthetic PushT demonstrations (out/pusht-demo)
	./scripts/demo.sh

test:  ## set up, then the tests (what CI runs); PYTEST_ARGS="-k export" to pick some
	./scripts/test.sh $(PYTEST_ARGS)

lock:  ## refresh requirements/constraints.txt from the newest versions pyproject.toml admits
	./scripts/lock.sh

setup:  ## only install what is missing
	./scripts/setup.sh
