# bash completion for latgov(8)

_latgov() {
    local cur prev words cword
    _init_completion || return

    local commands="topology snapshot status calibrate doctor explain"
    local i cmd=""
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --sysroot) ((i++)) ;;
            -*) ;;
            *) cmd=${words[i]}; break ;;
        esac
    done

    case $prev in
        --sysroot | --runtime-dir)
            _filedir -d
            return
            ;;
        -o | --output | --file | --config)
            _filedir
            return
            ;;
        --device)
            COMPREPLY=($(compgen -W "$(command ls /sys/block 2>/dev/null)" -- "$cur"))
            return
            ;;
        --cpu | --rounds | --ios | --max-seconds | --interval)
            return
            ;;
    esac

    case $cmd in
        "")
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--sysroot -h --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$commands" -- "$cur"))
            fi
            ;;
        topology) COMPREPLY=($(compgen -W "--json --sysroot -h --help" -- "$cur")) ;;
        snapshot) COMPREPLY=($(compgen -W "-o --output --sysroot -h --help" -- "$cur")) ;;
        status)
            COMPREPLY=($(compgen -W "--json --watch --interval --runtime-dir --sysroot -h --help" \
                -- "$cur"))
            ;;
        calibrate)
            COMPREPLY=($(compgen -W "--config --device --file --cpu --rounds --ios
                --max-seconds --output --runtime-dir --sysroot -h --help" -- "$cur"))
            ;;
        doctor) COMPREPLY=($(compgen -W "--runtime-dir --sysroot -h --help" -- "$cur")) ;;
        explain)
            if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "--config --runtime-dir --sysroot -h --help" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(command ls /sys/block 2>/dev/null)" -- "$cur"))
            fi
            ;;
    esac
} &&
    complete -F _latgov latgov
