# shellcheck shell=sh
# rsk_get: the one reader of key=value words in sh, part of every program (ahead of lib.sh) and of a
# lease's controller (RSK_CONTROLLER); its awk twin is kv() in lib.awk.
rsk_get() { # rsk_get LINE KEY: sets RSK_F to the value of key=value in a line ("" when absent); no fork
    RSK_F=" $1 "
    case $RSK_F in
        *" $2="*) RSK_F=${RSK_F#*" $2="}; RSK_F=${RSK_F%% *} ;;
        *) RSK_F='' ;;
    esac
}
