# arl tools gym: shared by the runners, which are shipped into the sandbox with this file
# prepended (shell/python.rs, shell/pytest.rs), so a job stays one file.
import os


def from_job(text, cwd, repl):
    # Job-directory paths in `text` as the model sees them (`repl` + name). The rlimit sandbox
    # runs jobs in a unique temporary directory; the wasm sandbox at the guest's root `/`,
    # where only `/name` of a file directly in it is a job path.
    if cwd != "/":
        return text.replace(cwd + "/", repl)
    import re
    names = sorted(os.listdir(cwd), key=len, reverse=True)
    if not names:
        return text
    pattern = r"(?<![\w./-])/(?=(?:%s)(?![\w.-]))" % "|".join(re.escape(n) for n in names)
    return re.sub(pattern, lambda m: repl, text)


