"""The grader's code that runs inside a sandbox worker, in the same process as the solution it judges.

What a solution can reach here, as any code of the process can (through `sys.modules`, the garbage collector, a
frame): the worker's whole memory, that is the payload (the task's code, the solution's, the seed, the draws, the
input configurations, the tolerance), the grade in progress (`worker.Grading`, its result so far, the reference
model and its weights), the guard's, the watch's and the snapshots' own objects (guard, introspection, integrity,
leftovers), every module of this package, torch and the libraries the worker imported; its scratch folder (its
temporary folder, home and compile caches, emptied after every task), the extensions folder, the GPU it was given;
its allow-listed environment; and its answer channel, where a line the worker loop did not write is caught by the
pool as `forged`. So nothing here is trusted once the solution has run: after each stretch of its code the guard, the
watch and the snapshots check what the grade relies on, and a change they find is the verdict `tampering`.

What it cannot reach, where the worker is confined (opgen/sandbox/confine.py; docs/grading.md, "The workers'
confinement": always on the CPU, on CUDA once verified there): the grader's process (no signals to it, no ptrace, no
reads or writes of its memory), its environment and secrets (the worker's own is an allow-list, and other processes'
`/proc` entries are unreadable), the network (local sockets alone, every `connect` refused), files outside its
scratch and the extensions folder (no writes there; no reads of the user's home or the temporary folders), and any
process past its task (a keeper ends them).

The grader's process reaches this package only through its entry points, the `module:function` paths below that a
`SandboxPool` runs (`run_many(PATH, payloads)`: a payload dict in, one JSON line out), and two pure helpers of
the payload and the line: `configs.input_configs`/`derive_sizes` (the configurations a payload names) and
`figures.speedups` (the speed-ups it adds to a line when it timed the reference apart); an agent's work folder
quotes the kernels-only rule's words (`kernels_only.GLUE_TEXT`). Nothing here imports the grader's side
(`opgen.grading` outside this package). The reference and describe workers are sent no solution.
"""

GRADE_FUNCTION = "opgen.grading.beside_solution.worker:grade_in_worker"   # one solution's grade: the verdict line
PROBE_FUNCTION = "opgen.grading.beside_solution.worker:probe_device"   # does the device work in a fresh worker?
COMPILE_FUNCTION = "opgen.grading.beside_solution.extension_worker:compile_in_worker"   # its extensions, on a CPU
REFERENCE_FUNCTION = "opgen.grading.beside_solution.reference_worker:time_reference_in_worker"   # never a solution
DESCRIBE_FUNCTION = "opgen.grading.beside_solution.describe_worker:describe_in_worker"   # a task's sizes and shapes
