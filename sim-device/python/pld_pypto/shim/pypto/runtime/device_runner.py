"""``pypto.runtime.device_runner`` on pld. Its ``compile_and_assemble``
builds a chip binary from the code PyPTO generated; pld generates no code
and runs programs as they are, so there is nothing to assemble: calling
it says so (the module imports, so a test file using it is collected and
reported as out of scope rather than failing to collect)."""


def compile_and_assemble(work_dir, platform=None, *args, **kwargs):
    raise NotImplementedError(
        f"compile_and_assemble({str(work_dir)!r}): pld generates no code to assemble into a chip binary; "
        "run the program itself (ir.compile(...)(args) or compiled.prepare())"
    )
