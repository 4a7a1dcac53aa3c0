fn main() -> std::process::ExitCode {
    arl_cli::main()
}
