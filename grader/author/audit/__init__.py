"""`grader audit`: mutation testing of a lesson's hidden tests.

Mutants of the solution (only the code between the solution markers: what students
write) are graded as a class through `grader run`'s own path, warm sandboxed workers
and all, and each is reported killed (below full marks), survived (full marks), or
equivalent (listed by the instructor, with a reason, in the lesson's
`equivalent_mutants.yml`).

Why our own operators on `ast`, not mutmut or cosmic-ray: both mutate files on disk
and run a test command per mutant, a process and a pytest start-up each, and neither
has the operators tensor code needs (dims, softmax/sigmoid, top-k's k, sum/mean,
index_add_/index_copy_, transposes, casts, dropped terms and renormalisations). Here
a mutant is just a source text, so a few hundred of them are one class to the
grader, graded at class speed.
"""
