"""`square`: a second task for the tests, in the shape of pipeline.pusht - a 3x3 square on a
16x16 frame that jumps to each action. Adding it takes this folder and one registry line
(tests/tasks/test_square_task.py)."""
